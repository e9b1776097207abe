"""Synthetic twins of the OGB-LSC datasets, in their exact official layouts."""

from preprocess.synth.mag240m import MagSynthSpec, synth_mag240m
from preprocess.synth.papers100m import PapersSynthSpec, synth_papers100m
from preprocess.synth.wikikg import WikiSynthSpec, synth_wikikg90mv2

__all__ = ["synth_mag240m", "synth_papers100m", "synth_wikikg90mv2", "MagSynthSpec",
           "PapersSynthSpec", "WikiSynthSpec"]

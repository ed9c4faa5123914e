"""Text classification with kernel SVMs over parse trees and packed parse
forests (Zhang et al. 2010, §4: one-vs-others SVMs with the forest kernel;
Zhang & Lee 2003: question classification with tree kernels), used by the
``kernel_textcat`` component. Submodules load their compiled code on use."""

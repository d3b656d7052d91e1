"""Networks of the benchmark: the C3LT classifier, autoencoders, feature network."""
from cflib.models.autoencoder import ConvAutoencoder
from cflib.models.classifier import C3LTClassifier, FeatureNet

__all__ = ["C3LTClassifier", "FeatureNet", "ConvAutoencoder"]

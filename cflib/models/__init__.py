"""Networks of the benchmark: the C3LT classifier, autoencoders, feature network."""
from cflib.models.classifier import C3LTClassifier, FeatureNet
from cflib.models.autoencoder import ConvAutoencoder

__all__ = ["C3LTClassifier", "FeatureNet", "ConvAutoencoder"]

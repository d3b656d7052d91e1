"""Networks of the benchmark: the C3LT classifier, autoencoders, feature network, and the
quantization chapter's SmallCNN and latent autoencoder."""
from cflib.models.autoencoder import ConvAutoencoder, LatentAutoencoder
from cflib.models.classifier import C3LTClassifier, FeatureNet, MLPJudge, ResNetJudge, SmallCNN

__all__ = ["C3LTClassifier", "FeatureNet", "ConvAutoencoder", "SmallCNN", "LatentAutoencoder",
           "ResNetJudge", "MLPJudge"]

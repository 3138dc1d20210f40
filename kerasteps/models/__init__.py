from kerasteps.models.wgan import WGAN

# isort: split
from kerasteps.models.classifier import build_image_classifier
from kerasteps.models.gan_builders import (
    build_image_critic,
    build_image_generator,
    build_point_critic,
    build_point_generator,
)
from kerasteps.models.mlp import build_mlp

__all__ = [
    "WGAN",
    "build_image_classifier",
    "build_image_critic",
    "build_image_generator",
    "build_mlp",
    "build_point_critic",
    "build_point_generator",
]

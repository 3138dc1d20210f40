"""Tests for `GaussianComponents` and `WGAN(likelihood_weight=...)`."""

import keras
import numpy as np
import pytest

import kerasteps
from kerasteps.models import WGAN, GaussianComponents, MixtureLatent

pytestmark = pytest.mark.neutral


def placed(
    centres, sigma, mean=(0.0, 0.0), std=1.0, probabilities=None, learn_weights=False
):
    """Components with no hidden layer, set so that component k is
    `N(mean + std * centres[k], (std * sigma)^2 I)`."""
    latent = MixtureLatent(centres, probabilities)
    layer = GaussianComponents(
        latent, (), mean, std, factor_scale=0.1, learn_weights=learn_weights
    )
    layer.build((None, 3))
    kernel = np.zeros((2, 6), "float32")
    kernel[:, :2] = np.eye(2)  # the mean is the centre
    bias = np.zeros(6, "float32")
    bias[2:] = np.eye(2).ravel() * sigma / layer.factor_scale  # the factor sigma * I
    layer.head.set_weights([kernel, bias])
    return layer


def draws(layer, n, seed=0):
    z = np.random.default_rng(seed).standard_normal((n, 3)).astype("float32")
    return np.asarray(layer(z))


def test_components_draw_and_score_the_mixture_they_are():
    centres = np.array([[0.0, 0.0], [4.0, 0.0]])
    layer = placed(centres, 0.5, mean=(1.0, -1.0), std=2.0, probabilities=[0.75, 0.25])
    x = draws(layer, 40_000)
    right = x[:, 0] > 5.0  # the second component sits at 1 + 2 * 4 = 9
    assert right.mean() == pytest.approx(0.25, abs=0.01)
    np.testing.assert_allclose(x[~right].mean(0), [1.0, -1.0], atol=0.02)
    np.testing.assert_allclose(x[right].mean(0), [9.0, -1.0], atol=0.03)
    np.testing.assert_allclose(x[right].std(0), [1.0, 1.0], rtol=0.03)

    points = np.array([[1.0, -1.0], [9.0, -1.0], [5.0, 0.0]])
    expected = np.log(
        sum(
            p * np.exp(-0.5 * ((points - c) ** 2).sum(1)) / (2 * np.pi)
            for p, c in ((0.75, [1.0, -1.0]), (0.25, [9.0, -1.0]))
        )
    )
    np.testing.assert_allclose(layer.log_density(points), expected, rtol=1e-5)


def test_components_save_and_load_with_their_shape(tmp_path):
    layer = placed(np.array([[0.0, 0.0], [3.0, 0.0]]), 0.2, mean=(1.0, 2.0), std=3.0)
    model = keras.Sequential([keras.Input((3,)), layer])
    path = tmp_path / "generator.keras"
    model.save(path)
    loaded = keras.saving.load_model(path).layers[0]
    z = np.random.default_rng(1).standard_normal((64, 3)).astype("float32")
    np.testing.assert_allclose(loaded(z), layer(z), rtol=1e-6)
    points = draws(layer, 5)
    np.testing.assert_allclose(
        loaded.log_density(points), layer.log_density(points), rtol=1e-6
    )
    assert (loaded.std, loaded.mean.tolist()) == (3.0, [1.0, 2.0])


def test_the_likelihood_term_makes_the_components_as_wide_as_the_data():
    """On every backend the term's gradient reaches the generator: trained with
    the likelihood term alone (critic scores weigh nothing beside it), narrow
    components on the two modes widen to the data's sigma of 0.3."""
    keras.utils.set_random_seed(0)
    rng = np.random.default_rng(0)
    modes = np.array([[-2.0, 0.0], [2.0, 0.0]], "float32")
    x = modes[rng.integers(2, size=4096)] + 0.3 * rng.standard_normal((4096, 2))
    layer = placed(modes / 2.0, 0.05, std=2.0)  # on the modes, 0.1 wide
    generator = keras.Sequential([keras.Input((3,)), layer])
    critic = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    gan = WGAN(generator, critic, latent_dim=3, n_critic=1, likelihood_weight=100.0)
    gan.compile(keras.optimizers.Adam(1e-6), keras.optimizers.Adam(0.05))
    before = -float(np.mean(layer.log_density(x)))
    gan.fit(x.astype("float32"), batch_size=256, epochs=4, verbose=0)
    after = -float(np.mean(layer.log_density(x)))
    assert after < before - 1.0, (before, after)
    samples = gan.generate(4000, seed=0)
    offsets = samples - modes[(samples[:, 0] > 0).astype(int)]
    np.testing.assert_allclose(offsets.std(0), [0.3, 0.3], rtol=0.15)


def test_learned_weights_follow_the_data_and_leave_a_stranded_component(tmp_path):
    """With `learn_weights`, the likelihood term moves the probabilities to the
    data's shares (0.8 and 0.2 from 1/3 each), away from a component that
    covers no data, and the draws follow them; saved and loaded with the model."""
    keras.utils.set_random_seed(0)
    rng = np.random.default_rng(0)
    modes = np.array([[-2.0, 0.0], [2.0, 0.0]], "float32")
    x = modes[(rng.random(4096) < 0.2).astype(int)]
    x = x + 0.3 * rng.standard_normal((4096, 2)).astype("float32")
    centres = np.array([[-1.0, 0.0], [1.0, 0.0], [0.0, 3.0]])  # the last: stranded
    layer = placed(centres, 0.15, std=2.0, learn_weights=True)
    np.testing.assert_allclose(layer.probabilities(), [1 / 3] * 3, rtol=1e-6)
    generator = keras.Sequential([keras.Input((3,)), layer])
    critic = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    gan = WGAN(generator, critic, latent_dim=3, n_critic=1, likelihood_weight=100.0)
    gan.compile(keras.optimizers.Adam(1e-6), keras.optimizers.Adam(0.05))
    gan.fit(x, batch_size=256, epochs=6, verbose=0)
    learned = np.asarray(layer.probabilities())
    np.testing.assert_allclose(learned, [0.8, 0.2, 0.0], atol=0.03)
    # The draws follow the learned probabilities.
    z = np.random.default_rng(1).standard_normal((8000, 3)).astype("float32")
    picks = np.asarray(layer.latent.component(z[:, 2], learned))
    np.testing.assert_allclose(
        np.bincount(picks, minlength=3) / 8000, learned, atol=0.01
    )
    means, factors = layer.components(layer.latent.centres_of(picks))
    expected = 2.0 * (means + np.einsum("bij,bj->bi", factors, z[:, :2]))
    np.testing.assert_allclose(generator.predict(z, verbose=0), expected, atol=1e-4)
    path = tmp_path / "generator.keras"
    generator.save(path)
    loaded = keras.saving.load_model(path).layers[0]
    np.testing.assert_allclose(loaded.probabilities(), learned, rtol=1e-6)


def test_mean_distances_are_to_the_nearest_point():
    layer = placed(np.array([[0.0, 0.0], [4.0, 0.0]]), 0.5, mean=(1.0, 0.0), std=2.0)
    points = np.array([[1.0, 3.0], [8.0, 0.0], [-5.0, 0.0]])  # means at (1, 0), (9, 0)
    distances, probabilities = layer.mean_distances(points)
    np.testing.assert_allclose(distances, [3.0, 1.0], rtol=1e-4)
    np.testing.assert_allclose(probabilities, [0.5, 0.5])


@pytest.mark.parametrize("seed", [0, 1])
def test_the_anchor_term_pulls_a_stranded_component_to_the_data(seed):
    """A component 1.2 off a mode (12 sigma) explains no real point (the
    likelihood does not move it); the anchor term alone brings it to the data,
    and keeps the other component there."""
    keras.utils.set_random_seed(seed)
    rng = np.random.default_rng(seed)
    modes = np.array([[-2.0, 0.0], [2.0, 0.0]], "float32")
    x = modes[rng.integers(2, size=2048)] + 0.1 * rng.standard_normal((2048, 2))
    layer = placed(np.array([[-2.0, 0.0], [0.8, 0.0]]), 0.1)  # the second: stranded
    generator = keras.Sequential([keras.Input((3,)), layer])
    critic = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    gan = WGAN(generator, critic, latent_dim=3, n_critic=1, anchor_weight=100.0)
    gan.compile(keras.optimizers.Adam(1e-6), keras.optimizers.Adam(0.05))
    before, _ = layer.mean_distances(x)
    gan.fit(x.astype("float32"), batch_size=256, epochs=8, verbose=0)
    after, _ = layer.mean_distances(x)
    assert float(before[1]) > 0.8, before
    assert float(max(after)) < 0.3, (before, after)


def test_a_likelihood_weight_needs_a_generator_with_a_density():
    generator = keras.Sequential([keras.Input((2,)), keras.layers.Dense(2)])
    critic = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    with pytest.raises(
        ValueError, match="one layer with a `log_density` and a `mean_distances` method"
    ):
        WGAN(generator, critic, latent_dim=2, likelihood_weight=1.0)
    with pytest.raises(ValueError, match="`likelihood_weight` must be"):
        WGAN(generator, critic, latent_dim=2, likelihood_weight=-1.0)


def test_components_refuse_bad_arguments():
    with pytest.raises(ValueError, match="`latent` must be a MixtureLatent"):
        GaussianComponents(keras.layers.Dense(2))
    with pytest.raises(ValueError, match="`mean` must be 2 finite numbers"):
        GaussianComponents(MixtureLatent([[0.0, 0.0]]), mean=[0.0])
    with pytest.raises(ValueError, match="`std` must be"):
        GaussianComponents(MixtureLatent([[0.0, 0.0]]), std=0.0)
    with pytest.raises(TypeError, match="`learn_weights` must be True or False"):
        GaussianComponents(MixtureLatent([[0.0, 0.0]]), learn_weights=1)


def test_a_point_wgan_saved_mid_run_resumes_with_its_density(tmp_path):
    """`for_points`'s likelihood weight and components come back from `.keras`."""
    from kerasteps import mixtures
    from kerasteps.models import PointSettings

    x, _ = mixtures.ring_of_gaussians(1000, radius=1.0, seed=0)
    settings = PointSettings(components=4, widths=(8,), batch_size=32, steps=3)
    model = WGAN.for_points(x, settings, seed=0)
    batches = WGAN.make_dataset(x, 32, settings.n_critic, seed=0, repeat=True)
    model.fit(batches, steps_per_epoch=2, verbose=0)
    model.save(tmp_path / "m.keras")
    loaded = kerasteps.load_model(tmp_path / "m.keras")
    assert loaded.likelihood_weight == model.likelihood_weight > 0
    density = loaded.generator.get_layer("gaussian_components").log_density(x[:8])
    np.testing.assert_allclose(
        density,
        model.generator.get_layer("gaussian_components").log_density(x[:8]),
        rtol=1e-6,
    )
    loaded.fit(batches, steps_per_epoch=1, verbose=0)
    assert loaded.step_counters() == {"d_step": 9, "g_step": 3}


@pytest.mark.parametrize("likelihood_from", [2, None])
def test_from_likelihood_from_on_the_critic_no_longer_moves_the_generator(
    tmp_path, likelihood_from
):
    """Two steps, then a copy through `.keras` whose critic is changed: from
    generator step 2 on (a second `fit`, on the copy a resumed model) both
    generators train by maximum likelihood alone and stay equal; without the
    phase the changed critic sends them apart."""
    rng = np.random.default_rng(0)
    modes = np.array([[-2.0, 0.0], [2.0, 0.0]], "float32")
    x = modes[rng.integers(2, size=512)] + 0.1 * rng.standard_normal((512, 2))
    layer = placed(np.array([[-1.5, 0.0], [1.5, 0.0]]), 0.3, learn_weights=True)
    generator = keras.Sequential([keras.Input((3,)), layer])
    critic = keras.Sequential(
        [keras.Input((2,)), keras.layers.Dense(8, "relu"), keras.layers.Dense(1)]
    )
    gan = WGAN(
        generator,
        critic,
        latent_dim=3,
        n_critic=2,
        seed=0,
        energy_weight=1.0,
        likelihood_weight=0.01,
        likelihood_from=likelihood_from,
    )
    gan.compile(keras.optimizers.Adam(0.01), keras.optimizers.Adam(0.01))

    def batches():
        return WGAN.make_dataset(x, 64, 2, seed=0, repeat=True)

    gan.fit(batches(), steps_per_epoch=2, verbose=0)
    gan.save(tmp_path / "gan.keras")
    copy = kerasteps.load_model(tmp_path / "gan.keras")
    assert copy.likelihood_from == likelihood_from
    copy.critic.set_weights([2.0 * w + 0.5 for w in copy.critic.get_weights()])
    at_2 = [keras.ops.convert_to_numpy(v) for v in gan.generator.trainable_weights]
    for model in (gan, copy):
        model.fit(batches(), steps_per_epoch=3, verbose=0)
        assert model.step_counters() == {"d_step": 10, "g_step": 5}
    moved = [
        float(np.max(np.abs(a - b)))
        for a, b in zip(
            gan.generator.get_weights(), copy.generator.get_weights(), strict=True
        )
    ]
    if likelihood_from is None:
        assert max(moved) > 1e-4, moved
    else:
        assert max(moved) < 1e-6, moved
        # The phase trained them, the probabilities' logits included.
        after = gan.generator.trainable_weights
        assert len(after) == 3  # the head's kernel and bias, the logits
        trained = [
            float(np.max(np.abs(a - keras.ops.convert_to_numpy(b))))
            for a, b in zip(at_2, after, strict=True)
        ]
        assert min(trained) > 1e-4, trained


def test_likelihood_from_is_a_step_and_needs_a_density():
    generator = keras.Sequential([keras.Input((2,)), keras.layers.Dense(2)])
    critic = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    with pytest.raises(ValueError, match="or `likelihood_from`, needs a generator"):
        WGAN(generator, critic, latent_dim=2, likelihood_from=0)
    with pytest.raises(ValueError, match="`likelihood_from` must be"):
        WGAN(generator, critic, latent_dim=2, likelihood_from=-1)

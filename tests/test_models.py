"""The reference model builders: shapes, sizes, per-layer precision, tiny versions."""

from __future__ import annotations

import pytest

from tfaccel import models
from tfaccel.core.errors import UsageError

keras = pytest.importorskip("keras")


def test_reference_cnn_is_the_keras_cifar10_example() -> None:
    model = models.build("reference_cnn")
    assert model.input_shape == (None, 32, 32, 3)
    assert model.output_shape == (None, 10)
    assert model.count_params() == 1_250_858  # the Keras example's parameter count
    kinds = [type(layer).__name__ for layer in model.layers]
    assert kinds.count("Conv2D") == 4 and kinds.count("Dense") == 2


def test_mlp_and_resnet20_shapes() -> None:
    mlp = models.build("mlp")
    assert mlp.input_shape == (None, 28, 28) and mlp.output_shape == (None, 10)
    resnet = models.build("resnet20")
    assert resnet.output_shape == (None, 10)
    convs = [layer for layer in resnet.layers if type(layer).__name__ == "Conv2D"]
    assert len(convs) == 19 + 2  # 19 3x3 convolutions + 2 projection shortcuts
    assert 0.26e6 < resnet.count_params() < 0.28e6  # ResNet-20: ~0.27M parameters


def test_mixed_precision_is_per_layer_and_the_output_stays_float32() -> None:
    model = models.build("reference_cnn", tiny=True, dtype="mixed_bfloat16")
    first = model.layers[0]
    assert first.compute_dtype == "bfloat16" and first.variable_dtype == "float32"
    assert model.layers[-1].compute_dtype == "float32"
    assert keras.config.dtype_policy().name == "float32"  # the global policy is untouched


def test_tiny_versions_keep_the_input_shape() -> None:
    for name, info in models.MODELS.items():
        tiny = models.build(name, tiny=True)
        assert tiny.input_shape[1:] == info.input_shape
        assert tiny.count_params() < models.build(name).count_params() / 10


def test_bad_names_and_depths_are_clear_errors() -> None:
    with pytest.raises(UsageError, match="Unknown model"):
        models.build("vgg16")
    with pytest.raises(UsageError, match="6n\\+2"):
        models.resnet20(depth=21)


def test_each_reference_model_has_its_own_architecture_fingerprint() -> None:
    from tfaccel.architecture import fingerprint

    seen = {}
    for name in models.MODELS:
        for tiny in (False, True):
            digest = fingerprint(models.build(name, tiny=tiny))
            assert digest == fingerprint(models.build(name, tiny=tiny, dtype="mixed_bfloat16"))
            seen[(name, tiny)] = digest
    assert len(set(seen.values())) == len(seen)  # no two of them share one


@pytest.mark.parametrize(
    ("spelled", "key"),
    [
        ("resnet20", "resnet20"),
        ("ResNet-20", "resnet20"),
        ("resnet_20", "resnet20"),
        ("reference-cnn", "reference_cnn"),
        ("Reference_CNN", "reference_cnn"),
        ("referencecnn", "reference_cnn"),
        ("MLP", "mlp"),
    ],
)
def test_a_reference_models_name_is_read_in_one_place(spelled: str, key: str) -> None:
    assert models.model_key(spelled) == key


@pytest.mark.parametrize("bad", ["mlp ", " mlp", "resnet 20", "resnet21", "vgg16", "", "ｍｌｐ", 3])
def test_names_that_are_no_reference_model_are_refused_with_the_names(bad: object) -> None:
    with pytest.raises(UsageError, match="Unknown model") as raised:
        models.model_key(bad)  # type: ignore[arg-type]
    assert "reference_cnn, mlp, resnet20" in str(raised.value)


def test_every_command_takes_the_same_spellings() -> None:
    """tune --model, plan --model and profile --model read names through models.model_key."""
    from tfaccel.planning.source import reference_model_fn
    from tfaccel.profile.command import check_model_request
    from tfaccel.tuning.hooks import reference_hooks

    assert reference_hooks("ResNet-20", smoke=True).model_name == "resnet20"
    assert reference_model_fn("ResNet-20")[0] == "resnet20"
    check_model_request("ResNet-20", steps=1, warmup=0, batch_size=1, input="pipeline")
    for refuse in (reference_hooks, reference_model_fn):
        with pytest.raises(UsageError, match="Unknown model 'mlp '"):
            refuse("mlp ")
    with pytest.raises(UsageError, match="Unknown model 'mlp '"):
        check_model_request("mlp ", steps=1, warmup=0, batch_size=1, input="pipeline")

import pytest
import torch

from rankcollapse.errors import ConfigError
from rankcollapse.nets import SAN, CircleNet, SANConfig, plain_layer_norm


def test_plain_layer_norm_centres_and_scales_each_token():
    x = torch.tensor([[1.0, 2.0, 3.0], [5.0, 5.0, 8.0]])
    y = plain_layer_norm(x, eps=0.0)
    assert torch.allclose(y[0], torch.tensor([-1.0, 0.0, 1.0]) * (1.5**0.5))
    assert torch.allclose(y.mean(dim=-1), torch.zeros(2), atol=1e-6)
    assert torch.allclose(y.var(dim=-1, unbiased=False), torch.ones(2), atol=1e-5)


def test_the_san_classifies_the_normalised_output_of_its_body():
    config = SANConfig(inputs="tokens", vocab_size=10, n_classes=10, n_positions=8, n_layers=2,
                       d_model=8)  # fmt: skip
    model = SAN(config).eval()
    tokens = torch.randint(10, (3, 8), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        by_hand = model.classifier(plain_layer_norm(model.body(model.embed(tokens)).output))
        assert torch.equal(model(tokens), by_hand)
        # positions are added to the token embedding, then the authors' Linear + LayerNorm
        summed = model.embedding(tokens) + model.positions
        assert torch.equal(model.embed(tokens), model.embed_norm(model.embed_linear(summed)))


def _dropout_san(rate: float) -> SAN:
    return SAN(SANConfig(inputs="tokens", vocab_size=10, n_classes=10, n_positions=8, n_layers=2,
                         d_model=8, dropout=rate))  # fmt: skip


def test_dropout_acts_in_training_mode_in_the_authors_four_places_and_not_in_eval_mode():
    model = _dropout_san(0.5)
    tokens = torch.randint(10, (4, 8), generator=torch.Generator().manual_seed(1))
    dropouts = [m for m in model.modules() if isinstance(m, torch.nn.Dropout)]
    # one module for the embedding and the classifier input, two per layer (P and SA before
    # the skip-add)
    assert len(dropouts) == 1 + 2 * 2 and all(m.p == 0.5 for m in dropouts)
    with torch.no_grad():
        model.train()
        torch.manual_seed(0)
        first = model(tokens)
        second = model(tokens)
        assert not torch.allclose(first, second)  # fresh masks on every call
        model.eval()
        assert torch.equal(model(tokens), model(tokens))
        # eval mode is the model without dropout
        assert torch.allclose(model(tokens), _dropout_san(0.0).eval()(tokens), atol=1e-6)


def test_each_dropout_place_is_on_the_path_it_names():
    model = _dropout_san(0.5).train()
    tokens = torch.randint(10, (4, 8), generator=torch.Generator().manual_seed(1))
    seen = []
    for name, module in model.named_modules():
        if isinstance(module, torch.nn.Dropout):
            module.register_forward_hook(lambda m, i, o, name=name: seen.append(name))
    with torch.no_grad():
        model(tokens)
    assert seen == ["dropout", "body.blocks.0.attn.probs_dropout",
                    "body.blocks.0.branch_dropout", "body.blocks.1.attn.probs_dropout",
                    "body.blocks.1.branch_dropout", "dropout"]  # fmt: skip


def test_same_seed_same_weights_other_seed_other_weights():
    config = SANConfig(inputs="points", n_classes=2, n_layers=1, d_model=4)
    a, b = SAN(config), SAN(config)
    c = SAN(config.model_copy(update={"seed": 1}))
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters(), strict=True))
    assert not all(torch.equal(p, q) for p, q in zip(a.parameters(), c.parameters(), strict=True))


def test_too_long_sequences_for_the_positions_get_a_clear_error():
    model = SAN(SANConfig(inputs="tokens", vocab_size=4, n_classes=2, n_positions=3, n_layers=1,
                          d_model=4))  # fmt: skip
    with pytest.raises(ConfigError, match="sequences of 5 tokens but the SAN has 3 positions"):
        model(torch.zeros(1, 5, dtype=torch.long))


def test_circle_net_skip_variant_adds_its_input_to_the_pure_step():
    points = torch.randn(3, 2, 2, generator=torch.Generator().manual_seed(0))
    pure, skip = CircleNet("san", d_model=8, seed=1), CircleNet("san+skip", d_model=8, seed=1)
    assert torch.allclose(skip(points), points + pure(points), atol=1e-6)
    with_mlp = CircleNet("san+mlp", d_model=8, seed=1)
    assert with_mlp.layer.config.mlp and not pure.layer.config.mlp
    assert with_mlp(points).shape == (3, 2, 2)


def test_bad_san_configs_get_clear_errors():
    with pytest.raises(ConfigError, match="token inputs need vocab_size"):
        SANConfig(inputs="tokens", n_classes=2)
    with pytest.raises(ConfigError, match="d_model=10 is not divisible by n_heads=3"):
        SANConfig(inputs="points", n_classes=2, n_heads=3, d_model=10)

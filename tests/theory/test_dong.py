import math

import pytest
import torch

from rankcollapse.errors import ConfigError
from rankcollapse.metrics import composite_norm, res_comp
from rankcollapse.nets import NetConfig, ToyNet, random_tokens
from rankcollapse.theory import (
    bound_frame,
    informative_inputs,
    layer_constants,
    log10_stepwise_bound,
    log10_unrolled_bound,
    mlp_lipschitz,
    skip_network_without_collapse,
    toy_constants,
)


def test_composite_norm_of_a_hand_matrix():
    w = torch.tensor([[1.0, -2.0], [3.0, 4.0]], dtype=torch.float64)
    # ||W||_1 = max(4, 6) = 6, ||W||_inf = max(3, 7) = 7
    assert composite_norm(w).item() == pytest.approx(math.sqrt(42))


def test_constant_scales_with_heads_gamma_and_lipschitz():
    eye = torch.eye(3, dtype=torch.float64)
    one = layer_constants(eye[None], eye[None], eye[None], d_qk=9.0)
    assert one.c == pytest.approx(4 / 3)  # 4 gamma beta / sqrt(d_qk), beta = 1
    three = layer_constants(
        eye.repeat(3, 1, 1),
        eye.repeat(3, 1, 1),
        2 * eye.repeat(3, 1, 1),
        d_qk=9.0,
        gamma=0.5,
        lipschitz=2.0,
    )
    assert three.c == pytest.approx(2 * 3 * 4 * 0.5 * 2 / 3)


def test_chained_bound_equals_the_unrolled_formula_for_equal_constants():
    assert log10_stepwise_bound([5.0] * 4, 0.01)[-1] == pytest.approx(
        log10_unrolled_bound(5.0, 0.01, 4)
    )


def test_gelu_mlp_lipschitz_uses_its_largest_slope():
    eye = torch.eye(2, dtype=torch.float64)
    assert mlp_lipschitz(2 * eye, eye, "gelu") == pytest.approx(2 * 1.1289)


@pytest.mark.parametrize("n_heads, mlp", [(1, False), (2, False), (2, True)])
def test_bound_is_never_below_the_measured_residual_where_informative(n_heads, mlp):
    checked = 0
    for seed in range(4):
        net = ToyNet(
            NetConfig(n_layers=4, n_heads=n_heads, d_model=8, mlp=mlp, mlp_skip=False, seed=seed)
        )
        x0 = random_tokens(4, 6, 8, seed=seed)
        for delta in (1e-1, 1e-2, 1e-3):  # nearly identical tokens: sqrt(c) r_0 < 1
            frame = bound_frame(net, x0[:, :1] + delta * x0)
            for _, rows in frame.groupby("sample"):
                if not rows.query("metric == 'informative'")["value"].item():
                    continue
                r = rows.query("metric == 'log10_r' and not at_floor and layer > 0")
                for bound in ("log10_one_step", "log10_unrolled"):
                    b = rows.query(f"metric == '{bound}'").set_index("layer")["value"]
                    assert (b.loc[r["layer"]].to_numpy() >= r["value"].to_numpy()).all()
                    checked += len(r)
    assert checked > 0


def test_per_layer_constants_match_the_weights():
    net = ToyNet(NetConfig(n_layers=2, n_heads=2, d_model=4))
    constants = toy_constants(net, gamma=2.0)
    attn = net.layers[1].attn
    w_qk = attn.w_q.detach() @ attn.w_k.detach().transpose(-1, -2)
    beta = max(
        float(w_qk[h].abs().sum(0).max() * composite_norm(attn.head_matrices()[h].detach()))
        for h in range(2)
    )
    assert constants[1].beta == pytest.approx(beta)
    assert constants[1].c == pytest.approx(2 * 4 * 2.0 * beta / math.sqrt(net.temperature))


def test_skip_network_with_zero_values_keeps_its_residual_at_any_depth():
    net = skip_network_without_collapse(24, 3, 6, seed=1)
    x = random_tokens(2, 5, 6, seed=0)
    with torch.no_grad():
        states = net(x).states
    assert torch.equal(res_comp(states[-1]), res_comp(states[0]))


def test_bounds_refuse_networks_with_skips():
    net = ToyNet(NetConfig(n_layers=2, skip="on", d_model=4))
    with pytest.raises(ConfigError, match="skip='on'.*use skip='off'"):
        bound_frame(net, random_tokens(1, 3, 4, seed=0))


def test_informative_inputs_sit_at_the_asked_level_of_the_bound():
    z = random_tokens(3, 5, 4, seed=2)
    x = informative_inputs(z, 25.0, [0.5, 0.99])
    assert x.shape == (6, 4, 4)
    assert (5 * res_comp(x)).tolist() == pytest.approx([0.5] * 3 + [0.99] * 3, rel=1e-12)
    # Every sequence keeps its common point: tokens differ from z_0 by a multiple of Z.
    assert torch.allclose((x[:3] - z[:, :1]) / 0.5, (x[3:] - z[:, :1]) / 0.99)


def test_a_skip_network_gets_the_pure_san_bound_only_when_asked():
    net = ToyNet(NetConfig(n_layers=3, n_heads=2, skip="on", d_model=4, seed=0))
    pure = ToyNet(NetConfig(n_layers=3, n_heads=2, d_model=4, seed=0))
    x = random_tokens(2, 4, 4, seed=1)
    frame = bound_frame(net, x, allow_skip=True)
    reference = bound_frame(pure, x)
    c = frame.query("metric == 'c'")["value"].to_numpy()
    assert c == pytest.approx(reference.query("metric == 'c'")["value"].to_numpy())
    rel = frame.query("metric == 'res_comp_rel' and layer == 3")["value"]
    assert (rel > 0.01).all()  # the skip keeps the residual while the pure SAN's bound falls

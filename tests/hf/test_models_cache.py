"""The per-process cache of loaded folders never hands back weights the folder no longer holds."""

import torch

from rankcollapse.hf import load_model
from rankcollapse.hf.models import tiny_model
from rankcollapse.measure import probe


def _probe(model):
    kwargs = {"random_tokens": True, "n_samples": 2, "n_tokens": 6, "metrics": ["res_comp_rel"]}
    return probe(model, **kwargs).value.to_numpy()


def test_weights_saved_again_into_a_folder_are_loaded_and_probed_anew(tmp_path):
    first, second = tiny_model("bert", seed=0), tiny_model("bert", seed=1)
    first.save_pretrained(tmp_path)
    before = load_model(str(tmp_path))
    probed_before = _probe(str(tmp_path))
    assert load_model(str(tmp_path)).model is before.model  # unchanged folder: cached

    second.save_pretrained(tmp_path)  # a training loop's next checkpoint, same file names
    after = load_model(str(tmp_path))
    for name, tensor in second.state_dict().items():
        assert torch.equal(after.model.state_dict()[name], tensor), name
    probed_after = _probe(str(tmp_path))
    assert (probed_after == _probe(second)).all()  # the new weights are measured
    assert not (probed_after == probed_before).all()

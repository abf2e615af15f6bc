"""One definition per model, whatever the memory path (docs/models.md, "Editing a built-in model").

2D-TAN and MMN train through band paths (tan/modeling/map2d/band.py and each model's
banded functions) that are written apart from the models' own definitions: the
fusion's ``fuse``, a stack layer's ``activate`` and ``score``. Here every built-in
model with such a path takes one training step both ways, in float64, and the scores,
the loss and every gradient must agree; an edit of a definition alone (monkeypatched
onto the class, as an edit of its source would be) must make them disagree, and a
subclass that redefines one trains through its own definition. (Microsoft's 2D-TAN
trains through 2D-TAN's stack bands, its MapConv being a ProposalConv: the edits of
ProposalConv here are its edits too, and tests/test_tan_msra.py holds its band and
dense paths to its reference's arithmetic.)"""
import pytest
import torch
from torch.nn import functional as F

from tan.engine.step import forward_batch
from tan.modeling.mmn.joint_conv import JointProposalConv
from tan.modeling.tan2d.integrator import SentenceMapFusion
from tan.modeling.tan2d.predictor import ProposalConv

from test_band import SETTINGS, assert_mmn_gradients_close, mmn_model, tan_batch, tan_model

SETTING = SETTINGS[1]  # N 32, pooling [15, 8], K 5, 4 layers, strips of 8 rows
DENSE = SETTING[:4] + (0,)  # the same model on its plain definition: no strips, no bands


def training_step(model, batch):
    """(scores, loss, gradients, running statistics) of one training forward and backward."""
    model.train().zero_grad(set_to_none=True)
    output = forward_batch(model, batch)
    scores = model.scores(output).detach()
    loss = sum(model.losses(output, batch).values())
    loss.backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    stats = {n: b.clone() for n, b in model.named_buffers() if "running" in n or "batches" in n}
    return scores, loss.detach(), grads, stats


def tan_pair():
    cfg, banded = tan_model(SETTING, torch.float64)
    _, plain = tan_model(DENSE, torch.float64)
    return banded, plain, tan_batch(cfg, 6, torch.float64, sentences_per_video=2)


def mmn_pair():
    banded, batch = mmn_model(SETTING, torch.float64)
    plain, _ = mmn_model(DENSE, torch.float64)
    return banded, plain, batch


def assert_tan_paths_agree(banded, plain, batch):
    scores, loss, grads, _ = training_step(banded, batch)
    plain_scores, plain_loss, plain_grads, _ = training_step(plain, batch)
    torch.testing.assert_close(scores, plain_scores, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(loss, plain_loss, rtol=1e-12, atol=0)
    assert sorted(grads) == sorted(plain_grads)
    for name, grad in plain_grads.items():
        torch.testing.assert_close(grads[name], grad, rtol=1e-9, atol=1e-12, msg=name)


def assert_mmn_paths_agree(banded, plain, batch):
    scores, *rest = training_step(banded, batch)
    plain_scores, *plain_rest = training_step(plain, batch)
    torch.testing.assert_close(scores, plain_scores, rtol=1e-10, atol=1e-12)
    assert_mmn_gradients_close(rest, plain_rest, 1e-9)


PAIRS = {"2D-TAN": (tan_pair, assert_tan_paths_agree), "MMN": (mmn_pair, assert_mmn_paths_agree)}


def banded_module(model):
    return model.predictor if hasattr(model, "predictor") else model.proposal_conv


@pytest.mark.parametrize("name", sorted(PAIRS))
def test_training_on_bands_is_the_plain_definitions_step(name):
    make, assert_agree = PAIRS[name]
    banded, plain, batch = make()
    banded.train()
    with torch.enable_grad():
        assert banded_module(banded).stores_bands and not banded_module(plain).stores_bands
    assert_agree(banded, plain, batch)


def tan_fuse_without_normalization(self, sentence, map2d):
    return sentence[:, :, None, None] * self.conv(map2d)


def leaky_tan_layer(x, weight):
    return F.leaky_relu(x, 0.1) * weight.to(x.dtype)


def leaky_mmn_layer(y, weight, dtype=None):
    return F.leaky_relu(y, 0.1) * weight.to(dtype or y.dtype)


ORIGINAL_SCORE = ProposalConv.score


def tan_score_doubled(self, x):
    return 2 * ORIGINAL_SCORE(self, x)


# (model, class, method, an edited definition)
EDITS = [("2D-TAN", SentenceMapFusion, "fuse", tan_fuse_without_normalization),
         ("2D-TAN", ProposalConv, "activate", staticmethod(leaky_tan_layer)),
         ("2D-TAN", ProposalConv, "score", tan_score_doubled),
         ("MMN", JointProposalConv, "activate", staticmethod(leaky_mmn_layer))]


@pytest.mark.parametrize("edit", EDITS, ids=lambda e: f"{e[0]}-{e[1].__name__}.{e[2]}")
def test_an_edit_of_the_definition_alone_is_caught(edit, monkeypatch):
    name, cls, method, edited = edit
    make, assert_agree = PAIRS[name]
    monkeypatch.setattr(cls, method, edited)
    banded, plain, batch = make()
    with pytest.raises(AssertionError):
        assert_agree(banded, plain, batch)


@pytest.mark.parametrize("edit", EDITS, ids=lambda e: f"{e[0]}-{e[1].__name__}.{e[2]}")
def test_a_subclass_that_redefines_it_trains_through_its_own_definition(edit):
    name, cls, method, edited = edit
    make, assert_agree = PAIRS[name]
    subclass = type(f"Edited{cls.__name__}", (cls,), {method: edited})
    banded, plain, batch = make()
    for model in (banded, plain):
        for module in model.modules():
            if type(module) is cls:
                module.__class__ = subclass
    assert_agree(banded, plain, batch)
    if cls is not SentenceMapFusion:  # a redefined layer: the stack trains dense (a redefined fusion: the
        with torch.enable_grad():     # predictor keeps its bands, fed by the fusion's own output)
            assert not banded_module(banded.train()).stores_bands

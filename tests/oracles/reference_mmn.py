"""A baseline written the way MCG-NJU/MMN computes things, for side-by-side
benchmarks and equivalence tests of tan's MMN. Nothing in tan/ uses it.

Parameter and buffer names are MMN's (``featpool.conv``, ``feat2d.convs``,
``proposal_conv.{convs,bn,conv1x1_iou,conv1x1_contrastive}``,
``text_encoder.{fc_out1,fc_out2,layernorm}``), with an LSTM (``text_encoder.lstm``)
where MMN has DistilBERT. Done MMN's way: the 2D map is filled one diagonal at
a time by a chain of 1D pools or convs; the stacked convs recompute their
masked weights from the mask on every forward; sentences are encoded one video
at a time; scores and both losses loop over the videos in Python; the valid
cells are picked with ``masked_select``; each query carries a stored N x N IoU
map built on the CPU. Batches are MMN's: per-video lists of sentences.
"""
import torch
from torch import nn
from torch.nn import functional as F

from tan.modeling.map2d.feat2d import build_mask2d


class FeatAvgPool(nn.Module):
    """[V, P, D_in] -> [V, H, N]: a 1x1 conv, relu, then an overlapping average pool."""

    def __init__(self, input_size, hidden_size, kernel_size, stride):
        super().__init__()
        self.conv = nn.Conv1d(input_size, hidden_size, 1, 1)
        self.pool = nn.AvgPool1d(kernel_size, stride)

    def forward(self, x):
        return self.pool(self.conv(x.transpose(1, 2)).relu())


def chain_steps(num_clips, pooling_counts):
    """Per diagonal after the main one, in the order the chain fills them: the
    step's (kernel, stride) ((3, 2) on entering a later group of POOLING_COUNTS,
    else (2, 1)) and the diagonal's (rows, cols)."""
    steps, stride, offset = [], 1, 0
    for group, count in enumerate(pooling_counts):
        for step in range(count):
            offset += stride
            steps.append(((3, 2) if group > 0 and step == 0 else (2, 1),
                          (range(0, num_clips - offset, stride), range(offset, num_clips, stride))))
        stride *= 2
    return steps


class ChainMap2D(nn.Module):
    """FEAT2D "pool" (max-pools, no weights) or "conv" (``convs``, no activation):
    each step's output is written to its diagonal with one index assignment.
    The step lengths always equal the diagonal lengths, so nothing is sliced."""

    def __init__(self, name, num_clips, pooling_counts, hidden_size):
        super().__init__()
        kernels, self.cells = zip(*chain_steps(num_clips, pooling_counts))
        if name == "conv":
            self.convs = nn.ModuleList([nn.Conv1d(hidden_size, hidden_size, k, s) for k, s in kernels])
        elif name == "pool":
            self.pools = [nn.MaxPool1d(k, s) for k, s in kernels]  # a plain list, as MMN: no module names
        else:
            raise ValueError(f"FEAT2D.NAME must be 'pool' or 'conv', not {name!r}")
        self.register_buffer("mask2d", build_mask2d(num_clips, pooling_counts), persistent=False)

    def forward(self, x):
        b, h, n = x.shape
        map2d = x.new_zeros(b, h, n, n)
        map2d[:, :, range(n), range(n)] = x
        steps = self.convs if hasattr(self, "convs") else self.pools
        for step, (rows, cols) in zip(steps, self.cells):
            x = step(x)
            map2d[:, :, rows, cols] = x
        return map2d


def padded_mask_and_weight(mask, conv):
    """What MMN does after each stacked conv: count the valid cells under the kernel
    (a conv of the mask with ones), weight = 1 / count where any, and the new mask."""
    ones = torch.ones(1, 1, *conv.kernel_size, device=mask.device)
    weight = torch.round(F.conv2d(mask.float(), ones, stride=conv.stride, padding=conv.padding,
                                  dilation=conv.dilation))
    weight[weight > 0] = 1 / weight[weight > 0]
    return weight > 0, weight


class ProposalConv(nn.Module):
    """Stacked conv + BatchNorm + relu, each output scaled by its masked weight;
    then two 1x1 convs into the joint space (contrastive, IoU)."""

    def __init__(self, input_size, hidden_size, kernel_size, num_layers, joint_size):
        super().__init__()
        # all the padding goes on the first conv, so the stack keeps the N x N size
        first_padding = (kernel_size - 1) * num_layers // 2
        self.bn = nn.ModuleList([nn.BatchNorm2d(hidden_size)])
        self.convs = nn.ModuleList([nn.Conv2d(input_size, hidden_size, kernel_size, padding=first_padding)])
        for _ in range(num_layers - 1):
            self.convs.append(nn.Conv2d(hidden_size, hidden_size, kernel_size))
            self.bn.append(nn.BatchNorm2d(hidden_size))
        self.conv1x1_iou = nn.Conv2d(hidden_size, joint_size, 1)
        self.conv1x1_contrastive = nn.Conv2d(hidden_size, joint_size, 1)

    def forward(self, x, mask2d):
        mask = mask2d[None, None]
        for conv, bn in zip(self.convs, self.bn):
            x = bn(conv(x)).relu()
            mask, weight = padded_mask_and_weight(mask, conv)  # recomputed every call, as MMN does
            x = x * weight
        return self.conv1x1_contrastive(x), self.conv1x1_iou(x)


class LSTMTextEncoder(nn.Module):
    """MMN's text encoder with an LSTM in DistilBERT's place: the output at the last
    real word, layernorm, then fc_out1 (IoU branch) and fc_out2 (matching branch).
    Called on a list of videos, it encodes one video's sentences at a time."""

    def __init__(self, input_size, hidden_size, num_layers, bidirectional, joint_size):
        super().__init__()
        per_direction = hidden_size // 2 if bidirectional else hidden_size
        self.lstm = nn.LSTM(input_size, per_direction, num_layers, batch_first=True, bidirectional=bidirectional)
        self.fc_out1 = nn.Linear(hidden_size, joint_size)
        self.fc_out2 = nn.Linear(hidden_size, joint_size)
        self.layernorm = nn.LayerNorm(hidden_size)

    def last_word(self, queries, wordlens):
        if self.lstm.bidirectional:
            # packed, so the backward direction starts at the last real word
            packed = nn.utils.rnn.pack_padded_sequence(queries, wordlens.cpu(), batch_first=True,
                                                       enforce_sorted=False)
            out, _ = nn.utils.rnn.pad_packed_sequence(self.lstm(packed)[0], batch_first=True)
        else:
            out, _ = self.lstm(queries)  # padding after the last word cannot reach it
        return out[torch.arange(out.shape[0], device=out.device), wordlens.to(out.device) - 1]

    def forward(self, queries, wordlens):
        sent_match, sent_iou = [], []
        for q, w in zip(queries, wordlens):
            sentence = self.layernorm(self.last_word(q, w))
            sent_iou.append(self.fc_out1(sentence))
            sent_match.append(self.fc_out2(sentence))
        return sent_match, sent_iou


def pairwise_iou(a, b):
    """[A, 2] x [B, 2] moments -> [A, B] IoU (intersection over summed lengths minus it)."""
    inter = (torch.min(a[:, None, 1], b[:, 1]) - torch.max(a[:, None, 0], b[:, 0])).clamp(min=0)
    return inter / ((a[:, 1] - a[:, 0])[:, None] + (b[:, 1] - b[:, 0]) - inter)


def cosine_maps(map2d, sents):
    """Per video: [S_v, N, N] cosine of each sentence with each cell (list over videos)."""
    n = map2d.shape[-1]
    return [torch.mm(F.normalize(s, dim=1), F.normalize(m, dim=0).reshape(m.shape[0], -1)).reshape(-1, n, n)
            for m, s in zip(map2d, sents)]


class ReferenceMMN(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        mmn = cfg.MODEL.MMN
        hidden = mmn.FEATPOOL.HIDDEN_SIZE
        self.featpool = FeatAvgPool(mmn.FEATPOOL.INPUT_SIZE, hidden, mmn.FEATPOOL.KERNEL_SIZE,
                                    cfg.INPUT.NUM_PRE_CLIPS // mmn.NUM_CLIPS)
        self.feat2d = ChainMap2D(mmn.FEAT2D.NAME, mmn.NUM_CLIPS, mmn.FEAT2D.POOLING_COUNTS, hidden)
        self.proposal_conv = ProposalConv(hidden, mmn.PREDICTOR.HIDDEN_SIZE, mmn.PREDICTOR.KERNEL_SIZE,
                                          mmn.PREDICTOR.NUM_STACK_LAYERS, mmn.JOINT_SPACE_SIZE)
        lstm = mmn.TEXT_ENCODER.LSTM
        self.text_encoder = LSTMTextEncoder(cfg.INPUT.PRE_QUERY_SIZE, lstm.HIDDEN_SIZE, lstm.NUM_LAYERS,
                                            lstm.BIDIRECTIONAL, mmn.JOINT_SPACE_SIZE)
        loss = mmn.LOSS
        self.min_iou, self.max_iou = loss.MIN_IOU, loss.MAX_IOU
        self.top_k, self.margin = loss.NUM_POSTIVE_VIDEO_PROPOSAL, loss.MARGIN
        self.neg_iou, self.sent_removal_iou = loss.NEGATIVE_VIDEO_IOU, loss.SENT_REMOVAL_IOU
        self.tau_video, self.tau_sent = loss.TAU_VIDEO, loss.TAU_SENT
        self.score_pow = cfg.TEST.CONTRASTIVE_SCORE_POW
        self.eps = 1e-6

    @property
    def mask2d(self):
        return self.feat2d.mask2d

    def forward(self, feats, queries, wordlens):
        """feats [V, P, D_in]; queries, wordlens: per video [S_v, L, E], [S_v] ->
        (map2d_match, map2d_iou [V, J, N, N], sent_match, sent_iou: per video [S_v, J])."""
        map2d_match, map2d_iou = self.proposal_conv(self.feat2d(self.featpool(feats)), self.mask2d)
        sent_match, sent_iou = self.text_encoder(queries, wordlens)
        return map2d_match, map2d_iou, sent_match, sent_iou

    def iou_scores(self, outputs):
        _, map2d_iou, _, sent_iou = outputs
        return [(c * 10).sigmoid() * self.mask2d for c in cosine_maps(map2d_iou, sent_iou)]

    def contrastive_scores(self, outputs):
        map2d_match, _, sent_match, _ = outputs
        return [c * self.mask2d for c in cosine_maps(map2d_match, sent_match)]

    def test_scores(self, outputs):
        return [torch.pow(c * 0.5 + 0.5, self.score_pow) * s
                for c, s in zip(self.contrastive_scores(outputs), self.iou_scores(outputs))]

    def losses(self, outputs, iou2ds, moments, epoch=1):
        """(loss_vid, loss_sent, loss_iou), unweighted, as MMN's model returns them
        (its BCE takes the epoch and ignores it; so does this)."""
        loss_vid, loss_sent = self.contrastive_loss(outputs[0], outputs[2], iou2ds, moments)
        return loss_vid, loss_sent, self.bce_loss(self.iou_scores(outputs), iou2ds)

    def bce_loss(self, scores, iou2ds):
        target = ((torch.cat(iou2ds).masked_select(self.mask2d) - self.min_iou)
                  / (self.max_iou - self.min_iou)).clamp(0, 1)
        probs = torch.cat(scores).masked_select(self.mask2d)
        return nn.BCELoss(reduction="none")(probs, target).mean()

    def contrastive_loss(self, map2d, sent_feats, iou2ds, moments):
        v, c = map2d.shape[:2]
        device, k = map2d.device, self.top_k
        cells = F.normalize(map2d.masked_select(self.mask2d).reshape(v, c, -1), dim=1)  # [V, J, C]
        all_sents = F.normalize(torch.cat(sent_feats), dim=1)  # [S, J]
        total = all_sents.shape[0]
        bounds = [0]
        for s in sent_feats:
            bounds.append(bounds[-1] + s.shape[0])
        # Sentences that may act as negatives of a positive cell (row: its sentence):
        # all of other videos, those of its own video overlapping it below
        # SENT_REMOVAL_IOU, and itself (MMN adds the identity twice, then clamps).
        sent_mask = torch.ones(total, total, device=device)
        for i, m in enumerate(moments):
            sent_mask[bounds[i]:bounds[i + 1], bounds[i]:bounds[i + 1]] = (pairwise_iou(m, m) < self.sent_removal_iou).float()
        sent_mask = (sent_mask + 2 * torch.eye(total, device=device)).clamp(0, 1)
        margin_mask = torch.eye(total, device=device) * self.margin

        vid_pos, vid_neg, sent_neg = [], [], []
        for i, (sent, iou2d) in enumerate(zip(sent_feats, iou2ds)):
            sent = F.normalize(sent, dim=1)
            iou1d = iou2d.masked_select(self.mask2d).reshape(sent.shape[0], -1)  # [S_v, C]
            top = torch.topk(iou1d, k, dim=-1)[1]
            positives = cells[i].index_select(1, top.reshape(-1)).reshape(c, -1, k).permute(1, 2, 0)  # [S_v, k, J]
            pos = torch.bmm(positives, sent.unsqueeze(2)).reshape(-1, k) - self.margin
            vid_pos.append(pos)
            vid_neg.append(torch.mm(positives.reshape(-1, c), all_sents.t()).reshape(-1, k, total))
            # MMN zeroes the same-video cells of high IoU instead of dropping them:
            # each still adds exp(0) = 1 to the sentence loss's denominator.
            same = torch.mm(sent, cells[i]) * (iou1d < self.neg_iou).float()
            others = cells[torch.arange(v, device=device) != i].transpose(1, 0).reshape(c, -1)
            other = torch.mm(sent, others)
            sent_neg.append(torch.cat([pos.unsqueeze(2), same.unsqueeze(1).repeat(1, k, 1),
                                       other.unsqueeze(1).repeat(1, k, 1)], dim=2))
        pos = torch.cat(vid_pos)  # [S, k]
        neg = (torch.cat(vid_neg).permute(1, 0, 2) - margin_mask) / self.tau_video  # [k, S, S]
        denominator = (torch.exp(neg) * sent_mask).sum(dim=2)
        loss_vid = -(pos.t() / self.tau_video - torch.log(denominator)).mean()
        denominator = torch.exp(torch.cat(sent_neg) / self.tau_sent).sum(dim=2)
        loss_sent = -(pos / self.tau_sent - torch.log(denominator + self.eps)).mean()
        return loss_vid, loss_sent


def total_loss(loss_vid, loss_sent, loss_iou, epoch, cfg):
    """MMN's trainer: contrastive terms times CONTRASTIVE_WEIGHT, at full strength up to
    epoch SOLVER.ONLY_IOU and at 0.01 after. BCE_WEIGHT (unused by MMN, 1 in its configs)
    scales the BCE."""
    weight = cfg.MODEL.MMN.LOSS.CONTRASTIVE_WEIGHT
    loss_vid, loss_sent = loss_vid * weight, loss_sent * weight
    loss_iou = loss_iou * cfg.MODEL.MMN.LOSS.BCE_WEIGHT
    if epoch <= cfg.SOLVER.ONLY_IOU:
        return loss_iou + (loss_sent + loss_vid)
    return loss_iou + (loss_sent + loss_vid) * 0.01


def stored_iou2d_mmn(moment, num_clips, duration):
    """MMN's per-query [N, N] IoU map, on the CPU: candidate (i, j) spans
    [i, j + 1) * duration / N seconds (float32), IoU as MMN's ``iou``."""
    grids = torch.ones(num_clips, num_clips).nonzero()
    grids[:, 1] += 1
    candidates = grids * float(duration) / num_clips
    s, e = moment.float().cpu()
    inter = candidates[:, 1].min(e) - candidates[:, 0].max(s)
    union = candidates[:, 1].max(e) - candidates[:, 0].min(s)
    return (inter.clamp(min=0) / union).reshape(num_clips, num_clips)


def to_mmn_batch(batch, num_clips):
    """Our flat batch (sentences of a video contiguous, videos in order) -> MMN's:
    {"feats", "queries", "wordlens", "iou2ds", "moments"}, the last four lists over
    videos. Each video's queries are cut to its longest sentence, as MMN's
    tokenizer pads them; the IoU maps are built on the CPU, then moved."""
    feats = batch["feats"]
    counts = torch.bincount(batch["video_index"].cpu(), minlength=feats.shape[0]).tolist()
    out = {"feats": feats, "queries": [], "wordlens": [], "iou2ds": [], "moments": []}
    start = 0
    for count in counts:
        part = slice(start, start + count)
        wordlens = batch["wordlens"][part]
        out["queries"].append(batch["queries"][part, : int(wordlens.max())])
        out["wordlens"].append(wordlens)
        moments = batch["moments"][part].float()
        out["moments"].append(moments)
        out["iou2ds"].append(torch.stack([stored_iou2d_mmn(m, num_clips, d)
                                          for m, d in zip(moments, batch["durations"][part].tolist())])
                             .to(feats.device))
        start += count
    return out


def mmn_optimizer(cfg, model):
    # MMN's second group (DistilBERT, lr * 0.1) is empty with an LSTM encoder.
    return torch.optim.AdamW(model.parameters(), lr=cfg.SOLVER.LR, betas=(0.9, 0.99), weight_decay=1e-5)


def mmn_train_step(model, optimizer, mmn_batch, cfg, epoch=1):
    """One step of MMN's trainer; returns the detached loss terms and their total."""
    model.train()
    optimizer.zero_grad()
    outputs = model(mmn_batch["feats"], mmn_batch["queries"], mmn_batch["wordlens"])
    loss_vid, loss_sent, loss_iou = model.losses(outputs, mmn_batch["iou2ds"], mmn_batch["moments"], epoch)
    loss = total_loss(loss_vid, loss_sent, loss_iou, epoch, cfg)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 5)
    optimizer.step()
    return {"loss_vid": loss_vid.detach(), "loss_sent": loss_sent.detach(),
            "loss_iou": loss_iou.detach(), "loss": loss.detach()}

"""Bayesian classifiers for the Duell & Fan (2026) chapter: MC dropout and Bayes by Backprop.

Both share the C3LT CNN's layout (conv 1->32 5x5, ReLU, maxpool 2; conv 32->64 5x5,
ReLU, maxpool 2; FC 1024->256, ReLU; FC 256->C, C = ``n_classes``, 10 on MNIST) and one
interface, :class:`BayesianClassifier`:

- ``sample_probs(x, n_samples)`` -> (S, N, C) softmax probabilities, one row per
  posterior sample, all samples in one batched pass;
- ``predictive(x, n_samples)`` -> (mean, var), each (N, C): the posterior predictive
  mean and the variance of the class probabilities across posterior samples;
- ``forward(x)`` -> log of the posterior-mean probability, so the model drops in as a
  plain classifier (``argmax`` is the decision, ``softmax`` gives the mean back);
- ``deterministic_logits(x)`` -> one deterministic pass (dropout off for MC dropout,
  posterior-mean weights for the BNN), the model a non-Bayesian method sees;
- ``logits(x)`` -> the training pass (one stochastic sample per input in ``train()``
  mode, the deterministic pass in ``eval()`` mode); :func:`cflib.training.train_classifier`
  and :func:`cflib.training.accuracy` call it.

Posterior samples are *function* samples: a sample is one dropout mask on the 256
hidden units (MC dropout) or one draw of the weights (BNN), shared by every image of
the batch, so an image's prediction never depends on what else is in the batch.
With ``sample_seed`` set (the default, 0) every call uses the same S samples (common
random numbers): the classifier is then a deterministic function, which gradient and
greedy searches need and which makes validity reproducible.  ``sample_seed=None``
draws fresh samples from torch's global generator on every call.

Where the stochasticity lives (a choice the paper leaves open): in the two fully
connected layers, 83 % of the 317k weights.  The convolutional trunk is a point
estimate computed once per image, so S posterior samples cost one trunk pass plus S
small heads, not S full networks (8x cheaper at S = 20 on a CPU).  For MC dropout
this *is* the C3LT network (its only dropout is in the head); for the BNN it is a
"last-layers" Bayesian network (cf. Kristiadi et al. 2020, *Being Bayesian, even just
a bit*), trained jointly with the trunk by the ELBO.
"""
from __future__ import annotations

import contextlib
import math

import torch
import torch.nn.functional as F
from torch import nn

from cflib.progress import progress
from cflib.training import batches

__all__ = ["BayesianClassifier", "MCDropoutCNN", "BayesLinear", "BayesByBackpropCNN",
           "train_bnn", "predictive_accuracy"]

_DEFAULT = object()  # "use the model's own sample_seed"


def _trunk() -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(1, 32, 5), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 5), nn.ReLU(), nn.MaxPool2d(2),
    )


class BayesianClassifier(nn.Module):
    """Common interface of the Bayesian classifiers (see the module docstring).

    Subclasses implement :meth:`_draw_noise`, :meth:`_head_samples`,
    :meth:`deterministic_logits` and :meth:`logits`.
    """

    n_classes: int = 10

    def __init__(self, n_samples: int = 20, sample_seed: int | None = 0):
        super().__init__()
        if int(n_samples) < 1:
            raise ValueError(f"n_samples must be >= 1, got {n_samples}")
        self.n_samples = int(n_samples)
        self.sample_seed = sample_seed
        self._noise_cache: dict = {}

    # -- to implement -----------------------------------------------------------------
    def trunk_features(self, x: torch.Tensor) -> torch.Tensor:
        """The deterministic convolutional features, flattened to (N, 1024)."""
        return self.conv(x).flatten(1)

    def _draw_noise(self, n: int, generator: torch.Generator | None,
                    device: torch.device) -> dict[str, torch.Tensor]:
        raise NotImplementedError

    def _head_samples(self, f: torch.Tensor, noise: dict[str, torch.Tensor]) -> torch.Tensor:
        """(S, N, C) logits of the S posterior samples on trunk features ``f``."""
        raise NotImplementedError

    def deterministic_logits(self, x: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def logits(self, x: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def _head_inputs(self, f: torch.Tensor, noise: dict[str, torch.Tensor]):
        raise NotImplementedError

    def head_inputs(self, x: torch.Tensor, n_samples: int | None = None, seed=_DEFAULT):
        """The last linear layer's input and weights per posterior sample.

        Returns ``(h, W, b)`` with h (S, N, 256), W (S or 1, C, 256), b (S or 1, C)
        such that ``h @ W.transpose(1, 2) + b.unsqueeze(1)`` equals
        :meth:`sample_logits` (ROAR perturbs W and b).
        """
        n = self._check(x, n_samples)
        return self._head_inputs(self.trunk_features(x), self._noise(n, seed))

    def perturbable_parameters(self) -> list[str]:
        """Names of the parameters that are the model's weights (for weight-noise metrics)."""
        return [n for n, p in self.named_parameters() if p.is_floating_point()]

    # -- shared -----------------------------------------------------------------------
    def _device(self) -> torch.device:
        return next(self.parameters()).device

    def _noise(self, n: int, seed) -> dict[str, torch.Tensor]:
        seed = self.sample_seed if seed is _DEFAULT else seed
        dev = self._device()
        if seed is None:  # fresh samples from the global generator of the device
            return self._draw_noise(n, None, dev)
        key = (int(seed), n, str(dev))
        if key not in self._noise_cache:
            if len(self._noise_cache) >= 8:
                self._noise_cache.clear()
            # drawn on the CPU from a seeded generator: the same samples on every device
            g = torch.Generator().manual_seed(int(seed))
            noise = self._draw_noise(n, g, torch.device("cpu"))
            self._noise_cache[key] = {k: v.to(dev) for k, v in noise.items()}
        return self._noise_cache[key]

    def _check(self, x: torch.Tensor, n_samples) -> int:
        if not torch.is_tensor(x) or x.dim() != 4:
            raise ValueError(
                f"x must be a batch of images of shape (N, 1, 28, 28); got "
                f"{tuple(x.shape) if torch.is_tensor(x) else type(x).__name__}"
            )
        n = self.n_samples if n_samples is None else int(n_samples)
        if n < 1:
            raise ValueError(f"n_samples must be >= 1, got {n_samples}")
        return n

    def sample_logits(self, x: torch.Tensor, n_samples: int | None = None,
                      seed=_DEFAULT) -> torch.Tensor:
        """(S, N, C) logits of S posterior samples (S = ``n_samples`` or the default)."""
        n = self._check(x, n_samples)
        return self._head_samples(self.trunk_features(x), self._noise(n, seed))

    def sample_probs(self, x: torch.Tensor, n_samples: int | None = None,
                     seed=_DEFAULT) -> torch.Tensor:
        """(S, N, C) softmax probabilities of S posterior samples."""
        return torch.softmax(self.sample_logits(x, n_samples, seed), dim=-1)

    def predictive(self, x: torch.Tensor, n_samples: int | None = None,
                   seed=_DEFAULT) -> tuple[torch.Tensor, torch.Tensor]:
        """Posterior predictive mean and variance of the class probabilities, (N, C) each.

        The variance is the (biased, 1/S) variance across posterior samples: the
        epistemic spread that PSCE's epsilon-robustness bounds.
        """
        p = self.sample_probs(x, n_samples, seed)
        return p.mean(0), p.var(0, unbiased=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """log of the posterior-mean probability, (N, C); argmax is the decision."""
        return self.sample_probs(x).mean(0).clamp_min(1e-30).log()

    @contextlib.contextmanager
    def draws(self, n_samples: int | None = None, seed=_DEFAULT):
        """Inside the block, ``forward`` (and every method's default) uses ``n_samples``
        posterior samples drawn with ``seed``; both are restored on exit.

        Evaluation on draws that a search never saw (*fresh* draws) is
        ``with model.draws(seed=another_seed): ...``.
        """
        old = (self.n_samples, self.sample_seed)
        if n_samples is not None:
            if int(n_samples) < 1:
                raise ValueError(f"n_samples must be >= 1, got {n_samples}")
            self.n_samples = int(n_samples)
        if seed is not _DEFAULT:
            self.sample_seed = seed
        try:
            yield self
        finally:
            self.n_samples, self.sample_seed = old

    def extra_repr(self) -> str:
        return f"n_samples={self.n_samples}, sample_seed={self.sample_seed}"


class MCDropoutCNN(BayesianClassifier):
    """The C3LT CNN with its dropout (p = 0.5 before the last layer) kept on at prediction.

    Monte Carlo dropout (Gal & Ghahramani 2016): each dropout mask is a sample of the
    approximate posterior over weights; the predictive distribution is the average of
    the softmax over T masks.  The module names (``conv``, ``head``) match
    :class:`cflib.models.C3LTClassifier`, so its trained weights load directly
    (:meth:`from_classifier`).  The deterministic pass is the usual dropout-off,
    weight-scaled network.
    """

    def __init__(self, p: float = 0.5, n_samples: int = 20, sample_seed: int | None = 0):
        super().__init__(n_samples, sample_seed)
        if not 0.0 <= p < 1.0:
            raise ValueError(f"dropout probability must be in [0, 1), got {p}")
        self.p = float(p)
        self.conv = _trunk()
        self.head = nn.Sequential(
            nn.Flatten(), nn.Linear(1024, 256), nn.ReLU(), nn.Dropout(p),
            nn.Linear(256, self.n_classes),
        )

    @classmethod
    def from_classifier(cls, clf: nn.Module, **kwargs) -> "MCDropoutCNN":
        """An MC-dropout view of a trained :class:`~cflib.models.C3LTClassifier`."""
        model = cls(**kwargs)
        model.load_state_dict(clf.state_dict())
        return model.to(next(clf.parameters()).device)

    def _hidden(self, f: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.head[1](f))

    def _draw_noise(self, n, generator, device):
        # one Bernoulli mask of the 256 hidden units per posterior sample, inverted-dropout scaled
        u = torch.rand((n, 1, 256), generator=generator, device=device)
        keep = 1.0 - self.p
        return {"mask": (u < keep).float() / keep if keep > 0 else torch.zeros_like(u)}

    def _head_samples(self, f, noise):
        h = self._hidden(f).unsqueeze(0) * noise["mask"]       # (S, N, 256)
        return self.head[4](h)

    def _head_inputs(self, f, noise):
        h = self._hidden(f).unsqueeze(0) * noise["mask"]
        return h, self.head[4].weight.unsqueeze(0), self.head[4].bias.unsqueeze(0)

    def deterministic_logits(self, x):
        return self.head[4](self._hidden(self.trunk_features(x)))

    def logits(self, x):
        # nn.Dropout follows train()/eval(): one independent mask per image in training
        return self.head(self.conv(x))


class BayesLinear(nn.Module):
    """A mean-field Gaussian linear layer (Blundell et al. 2015, Bayes by Backprop).

    q(w) = N(mu, sigma^2) per weight with sigma = softplus(rho) (their Sec. 3.2);
    prior p(w) = N(0, prior_sigma^2), so the KL term has a closed form.  Training uses
    the local reparameterisation trick (Kingma, Salimans & Welling 2015): the
    pre-activations are sampled from their Gaussian, one draw per input, which is the
    same ELBO estimator with lower variance.  Prediction draws whole weight matrices,
    S at a time, with :meth:`sample_forward`.
    """

    def __init__(self, in_features: int, out_features: int, prior_sigma: float = 0.1,
                 rho_init: float = -5.0):
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        self.prior_sigma = float(prior_sigma)
        self.weight_mu = nn.Parameter(torch.empty(out_features, in_features))
        self.weight_rho = nn.Parameter(torch.full((out_features, in_features), float(rho_init)))
        self.bias_mu = nn.Parameter(torch.empty(out_features))
        self.bias_rho = nn.Parameter(torch.full((out_features,), float(rho_init)))
        # means start like nn.Linear
        nn.init.kaiming_uniform_(self.weight_mu, a=math.sqrt(5))
        bound = 1 / math.sqrt(in_features)
        nn.init.uniform_(self.bias_mu, -bound, bound)

    @property
    def weight_sigma(self) -> torch.Tensor:
        return F.softplus(self.weight_rho)

    @property
    def bias_sigma(self) -> torch.Tensor:
        return F.softplus(self.bias_rho)

    def kl(self) -> torch.Tensor:
        """KL(q || p) summed over the layer's weights and biases (closed form)."""
        out = 0.0
        for mu, sigma in ((self.weight_mu, self.weight_sigma), (self.bias_mu, self.bias_sigma)):
            out = out + (math.log(self.prior_sigma) - sigma.log()
                         + (sigma ** 2 + mu ** 2) / (2 * self.prior_sigma ** 2) - 0.5).sum()
        return out

    def mean_forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, self.weight_mu, self.bias_mu)

    def lrt_forward(self, x: torch.Tensor) -> torch.Tensor:
        mean = F.linear(x, self.weight_mu, self.bias_mu)
        var = F.linear(x ** 2, self.weight_sigma ** 2, self.bias_sigma ** 2)
        return mean + var.clamp_min(1e-16).sqrt() * torch.randn_like(mean)

    def draw_noise(self, n: int, generator, device) -> dict[str, torch.Tensor]:
        return {
            "w": torch.randn((n, self.out_features, self.in_features), generator=generator,
                             device=device),
            "b": torch.randn((n, self.out_features), generator=generator, device=device),
        }

    def sample_forward(self, x: torch.Tensor, eps: dict[str, torch.Tensor]) -> torch.Tensor:
        """Outputs of S weight samples: x (N, in) or (S, N, in) -> (S, N, out)."""
        w = self.weight_mu + self.weight_sigma * eps["w"]          # (S, out, in)
        b = self.bias_mu + self.bias_sigma * eps["b"]              # (S, out)
        if x.dim() == 2:
            x = x.unsqueeze(0).expand(w.shape[0], -1, -1)
        return torch.baddbmm(b.unsqueeze(1), x, w.transpose(1, 2))

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"prior_sigma={self.prior_sigma}")


class BayesByBackpropCNN(BayesianClassifier):
    """A Bayes-by-Backprop network: C3LT trunk, mean-field Gaussian FC 1024->256->10.

    The two fully connected layers are :class:`BayesLinear` (q = N(mu, softplus(rho)^2),
    prior N(0, ``prior_sigma``^2)); the convolutional trunk is a point estimate learned
    jointly (see the module docstring).  Train with :func:`train_bnn` (the ELBO of
    Blundell et al. 2015, Eq. 2, minibatch-weighted KL / N_train).  The deterministic
    pass uses the posterior-mean weights.
    """

    def __init__(self, prior_sigma: float = 0.1, rho_init: float = -5.0, n_samples: int = 20,
                 sample_seed: int | None = 0):
        super().__init__(n_samples, sample_seed)
        self.conv = _trunk()
        self.fc1 = BayesLinear(1024, 256, prior_sigma, rho_init)
        self.fc2 = BayesLinear(256, self.n_classes, prior_sigma, rho_init)

    def kl(self) -> torch.Tensor:
        return self.fc1.kl() + self.fc2.kl()

    def perturbable_parameters(self) -> list[str]:
        # the weights are the trunk's and the posterior means; rho parametrises the spread
        return [n for n, _ in self.named_parameters() if not n.endswith("_rho")]

    def _draw_noise(self, n, generator, device):
        e1, e2 = self.fc1.draw_noise(n, generator, device), self.fc2.draw_noise(n, generator, device)
        return {"fc1.w": e1["w"], "fc1.b": e1["b"], "fc2.w": e2["w"], "fc2.b": e2["b"]}

    def _head_samples(self, f, noise):
        h = torch.relu(self.fc1.sample_forward(f, {"w": noise["fc1.w"], "b": noise["fc1.b"]}))
        return self.fc2.sample_forward(h, {"w": noise["fc2.w"], "b": noise["fc2.b"]})

    def _head_inputs(self, f, noise):
        h = torch.relu(self.fc1.sample_forward(f, {"w": noise["fc1.w"], "b": noise["fc1.b"]}))
        w = self.fc2.weight_mu + self.fc2.weight_sigma * noise["fc2.w"]
        b = self.fc2.bias_mu + self.fc2.bias_sigma * noise["fc2.b"]
        return h, w, b

    def deterministic_logits(self, x):
        return self.fc2.mean_forward(torch.relu(self.fc1.mean_forward(self.trunk_features(x))))

    def logits(self, x):
        if not self.training:
            return self.deterministic_logits(x)
        h = torch.relu(self.fc1.lrt_forward(self.trunk_features(x)))
        return self.fc2.lrt_forward(h)


def train_bnn(model: BayesByBackpropCNN, x: torch.Tensor, y: torch.Tensor, epochs: int,
              lr: float = 1e-3, batch_size: int = 128, seed: int = 0,
              desc: str = "BNN") -> dict:
    """Minimise the negative ELBO with Adam (Blundell et al. 2015, Eq. 2 and Sec. 3.4).

    Per minibatch: mean NLL + KL(q || p) / N_train, i.e. the ELBO divided by the number
    of training images with the KL spread uniformly over minibatches.  Returns the
    last epoch's mean NLL and KL for the record.
    """
    dev = next(model.parameters()).device
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    n = len(x)
    model.train()
    nll_sum = kl_val = 0.0
    for ep in progress(range(epochs), desc=desc):
        nll_sum, seen = 0.0, 0
        for idx in batches(n, batch_size, seed + ep):
            xb, yb = x[idx].to(dev), y[idx].to(dev)
            nll = F.cross_entropy(model.logits(xb), yb)
            kl = model.kl()
            loss = nll + kl / n
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            nll_sum += nll.item() * len(idx)
            seen += len(idx)
            kl_val = kl.item()
        nll_sum /= max(seen, 1)
    model.eval()
    return {"train_nll": nll_sum, "kl": kl_val}


@torch.no_grad()
def predictive_accuracy(model: BayesianClassifier, x: torch.Tensor, y: torch.Tensor,
                        batch_size: int = 1000) -> float:
    """Top-1 accuracy of the posterior-mean prediction (``model(x).argmax(1)``)."""
    was = model.training
    model.eval()
    dev = next(model.parameters()).device
    correct = sum((model(x[i:i + batch_size].to(dev)).argmax(1).cpu()
                   == y[i:i + batch_size]).sum().item() for i in range(0, len(x), batch_size))
    model.train(was)
    return correct / len(x)

"""Prediction-powered estimate of a mean from a small labeled set and a large proxy layer.

``y`` (shape ``(n,)``) is the expensive outcome on the labeled items, ``yhat`` (``(n,)``)
the cheap proxy on the same items and ``yhat_unlabeled`` (``(N,)``) the proxy on the items
nobody labeled. In annoplan ``y`` is ``1[r_k = primary]`` on the overlap and the proxy is
``1[judge = primary]``, known on every item (docs/method.md §9).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
from scipy.special import ndtri

from planner.intervals import ConfidenceInterval


@dataclass(frozen=True)
class MeanEstimate:
    """A mean with its normal-approximation standard error and interval."""

    estimate: float
    standard_error: float
    confidence_interval: ConfidenceInterval


@dataclass(frozen=True)
class PPIMean:
    """PPI++ estimate of ``E[y]`` beside the overlap-only (classical) estimate.

    ``lam`` is the proxy's weight (0 = classical, 1 = plain PPI). ``effective_n`` is the
    number of labeled items a classical estimate needs for PPI's standard error:
    ``n * se_classical^2 / se^2`` (``n`` when both are zero, ``inf`` when only PPI's is).
    """

    estimate: float
    standard_error: float
    confidence_interval: ConfidenceInterval
    lam: float
    classical: MeanEstimate
    effective_n: float
    n_labeled: int
    n_unlabeled: int
    alpha: float


def ppi_mean(
    y: np.ndarray,
    yhat: np.ndarray,
    yhat_unlabeled: np.ndarray,
    *,
    lam: float | Literal["auto"] = "auto",
    alpha: float = 0.05,
    weights: np.ndarray | None = None,
    weights_unlabeled: np.ndarray | None = None,
) -> PPIMean:
    """PPI++ mean with a two-sided ``1 - alpha`` normal interval (docs/method.md §9).

    ``theta = mean_N(w~ lam yhat_u) + mean_n(w (y - lam yhat))``,
    ``SE^2 = Var_N(w~ lam yhat_u)/N + Var_n(w (y - lam yhat))/n`` (ddof 0), with the
    weights rescaled to mean 1 in each sample (none = all 1). ``lam="auto"`` takes
    ``Cov_n(g, g^) / ((1 + n/N) Var_{n+N}(g^))`` clipped to ``[0, 1]``, where ``g`` and
    ``g^`` are the weighted residuals of ``y`` and of the proxy about the ``lam = 1``
    estimate (covariance ddof 0, variance over all ``n + N`` proxies ddof 1); a constant
    proxy carries no information and gets ``lam = 0``. Angelopoulos, Duchi & Zrnic (2023),
    "PPI++: Efficient Prediction-Powered Inference".

    >>> r = ppi_mean(np.r_[np.ones(78), np.zeros(12), np.ones(4), np.zeros(6)],
    ...              np.r_[np.ones(78), np.zeros(12), np.zeros(4), np.ones(6)],
    ...              np.r_[np.ones(720), np.zeros(180)])
    >>> round(r.lam, 6), round(r.estimate, 6), round(r.classical.estimate, 2)
    (0.520344, 0.799186, 0.82)
    """
    y, yhat, yhat_u, w, w_u = _ppi_mean_iv(
        y, yhat, yhat_unlabeled, lam, alpha, weights, weights_unlabeled
    )
    n, n_unlabeled = y.size, yhat_u.size
    if lam == "auto":
        lam = _tuned_lam(y, yhat, yhat_u, w, w_u)
    z = float(ndtri(1.0 - alpha / 2.0))
    theta, se = _ppi_moments(y, yhat, yhat_u, w, w_u, float(lam))
    classical_theta, classical_se = _ppi_moments(y, yhat, yhat_u, w, w_u, 0.0)
    if se > 0.0:
        effective_n = n * classical_se**2 / se**2
    else:
        effective_n = float(n) if classical_se == 0.0 else np.inf
    return PPIMean(
        estimate=theta,
        standard_error=se,
        confidence_interval=ConfidenceInterval(theta - z * se, theta + z * se),
        lam=float(lam),
        classical=MeanEstimate(
            estimate=classical_theta,
            standard_error=classical_se,
            confidence_interval=ConfidenceInterval(
                classical_theta - z * classical_se, classical_theta + z * classical_se
            ),
        ),
        effective_n=float(effective_n),
        n_labeled=n,
        n_unlabeled=n_unlabeled,
        alpha=alpha,
    )


def _ppi_moments(
    y: np.ndarray,
    yhat: np.ndarray,
    yhat_u: np.ndarray,
    w: np.ndarray,
    w_u: np.ndarray,
    lam: float,
) -> tuple[float, float]:
    """``(theta, SE)`` of the PPI estimate at a fixed ``lam`` (docs/method.md §9)."""
    imputed = w_u * lam * yhat_u
    rectifier = w * (y - lam * yhat)
    theta = float(imputed.mean() + rectifier.mean())
    se = float(np.sqrt(imputed.var() / yhat_u.size + rectifier.var() / y.size))
    return theta, se


def _tuned_lam(
    y: np.ndarray, yhat: np.ndarray, yhat_u: np.ndarray, w: np.ndarray, w_u: np.ndarray
) -> float:
    """The variance-minimising proxy weight, clipped to ``[0, 1]`` (docs/method.md §9)."""
    theta_one, _ = _ppi_moments(y, yhat, yhat_u, w, w_u, 1.0)
    grad = w * (y - theta_one)
    grad_hat = w * (yhat - theta_one)
    proxy_all = np.concatenate([grad_hat, w_u * (yhat_u - theta_one)])
    var_proxy = float(proxy_all.var(ddof=1))
    if var_proxy == 0.0:
        return 0.0
    cov = float(np.mean((grad - grad.mean()) * (grad_hat - grad_hat.mean())))
    lam = cov / ((1.0 + y.size / yhat_u.size) * var_proxy)
    return float(np.clip(lam, 0.0, 1.0))


def _ppi_mean_iv(
    y: object,
    yhat: object,
    yhat_unlabeled: object,
    lam: object,
    alpha: object,
    weights: object,
    weights_unlabeled: object,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Checked float arrays ``y, yhat, yhat_u`` and weights rescaled to mean 1."""
    arrays = []
    for name, value in (("y", y), ("yhat", yhat), ("yhat_unlabeled", yhat_unlabeled)):
        arr = np.asarray(value, dtype=float)
        if arr.ndim != 1:
            raise ValueError(f"{name} must be one-dimensional, got shape {arr.shape}")
        if not np.all(np.isfinite(arr)):
            raise ValueError(f"{name} must be finite")
        arrays.append(arr)
    y_arr, yhat_arr, yhat_u = arrays
    if y_arr.size < 2:
        raise ValueError(f"need at least 2 labeled items, got {y_arr.size}")
    if yhat_arr.size != y_arr.size:
        raise ValueError(
            f"y and yhat must have the same length, got {y_arr.size} and {yhat_arr.size}"
        )
    if yhat_u.size < 1:
        raise ValueError("yhat_unlabeled must hold at least one item")
    if isinstance(lam, str):
        if lam != "auto":
            raise ValueError(f"lam must be 'auto' or a number, got {lam!r}")
    elif not (isinstance(lam, (int, float, np.floating)) and np.isfinite(lam)):
        raise ValueError(f"lam must be 'auto' or a finite number, got {lam!r}")
    if not (isinstance(alpha, (float, int, np.floating)) and 0.0 < alpha < 1.0):
        raise ValueError(f"alpha must be in (0, 1), got {alpha!r}")
    w = _mean_one_weights(weights, y_arr.size, "weights")
    w_u = _mean_one_weights(weights_unlabeled, yhat_u.size, "weights_unlabeled")
    return y_arr, yhat_arr, yhat_u, w, w_u


def _mean_one_weights(weights: object, size: int, name: str) -> np.ndarray:
    """``weights`` rescaled to mean 1 (all ones when ``None``), after checking them."""
    if weights is None:
        return np.ones(size)
    arr = np.asarray(weights, dtype=float)
    if arr.shape != (size,):
        raise ValueError(f"{name} must have shape ({size},), got {arr.shape}")
    if not np.all(np.isfinite(arr)) or np.any(arr <= 0.0):
        raise ValueError(f"{name} must be positive and finite")
    return arr / float(arr.mean())

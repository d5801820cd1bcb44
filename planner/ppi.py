"""Prediction-powered estimate of a mean from a small labeled set and a large proxy layer.

``y`` (shape ``(n,)``) is the expensive outcome on the labeled items, ``yhat`` (``(n,)``)
the cheap proxy on the same items and ``yhat_unlabeled`` (``(N,)``) the proxy on the items
nobody labeled. In annoplan ``y`` is ``1[r_k = primary]`` on the overlap and the proxy is
``1[judge = primary]``, known on every item (docs/method.md §9).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, NamedTuple

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
    confidence_level: float


def ppi_mean(
    y: np.ndarray,
    yhat: np.ndarray,
    yhat_unlabeled: np.ndarray,
    *,
    lam: float | Literal["auto"] = "auto",
    confidence_level: float = 0.95,
    weights: np.ndarray | None = None,
    weights_unlabeled: np.ndarray | None = None,
) -> PPIMean:
    """PPI++ mean with a two-sided normal interval of coverage ``confidence_level`` (docs/method.md §9).

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
    y, yhat, yhat_u, w, w_u = _ppi_mean_iv(y, yhat, yhat_unlabeled, lam, confidence_level, weights, weights_unlabeled)
    n, n_unlabeled = y.size, yhat_u.size
    if lam == "auto":
        lam = _tuned_lam(y, yhat, yhat_u, w, w_u)
    z = float(ndtri(0.5 + confidence_level / 2.0))
    theta, se = _ppi_moments(y, yhat, yhat_u, w, w_u, float(lam))
    classical_theta, classical_se = _ppi_moments(y, yhat, yhat_u, w, w_u, 0.0)
    if se > 0.0:
        effective_n = n * classical_se**2 / se**2
    else:
        effective_n = float(n) if classical_se == 0.0 else np.inf
    return PPIMean(
        estimate=theta,
        standard_error=se,
        confidence_interval=ConfidenceInterval(theta - z * se, theta + z * se, method="delta"),
        lam=float(lam),
        classical=MeanEstimate(
            estimate=classical_theta,
            standard_error=classical_se,
            confidence_interval=ConfidenceInterval(
                classical_theta - z * classical_se, classical_theta + z * classical_se, method="delta"
            ),
        ),
        effective_n=float(effective_n),
        n_labeled=n,
        n_unlabeled=n_unlabeled,
        confidence_level=confidence_level,
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


def _tuned_lam(y: np.ndarray, yhat: np.ndarray, yhat_u: np.ndarray, w: np.ndarray, w_u: np.ndarray) -> float:
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
    confidence_level: object,
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
        raise ValueError(f"y and yhat must have the same length, got {y_arr.size} and {yhat_arr.size}")
    if yhat_u.size < 1:
        raise ValueError("yhat_unlabeled must hold at least one item")
    if isinstance(lam, str):
        if lam != "auto":
            raise ValueError(f"lam must be 'auto' or a number, got {lam!r}")
    elif not (isinstance(lam, (int, float, np.floating)) and np.isfinite(lam)):
        raise ValueError(f"lam must be 'auto' or a finite number, got {lam!r}")
    if not (isinstance(confidence_level, (float, int, np.floating)) and 0.0 < confidence_level < 1.0):
        raise ValueError(f"confidence_level must be in (0, 1), got {confidence_level!r}")
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


# --------------------------------------------------------------------------- the judge's margin


class PPIGaps(NamedTuple):
    """Per batch row (replicate) and held-out human: ``d_k`` by PPI++, its SE, ``lam``, ``m``.

    NaN where undefined (fewer than 2 overlap items).
    """

    d: np.ndarray  # (B, K)
    standard_error: np.ndarray  # (B, K)
    lam: np.ndarray  # (B, K)
    m: np.ndarray  # (B, K) overlap items of r_k


_L_WIDTH, _U_WIDTH = 10, 6


def ppi_gap_features(a: np.ndarray, b: np.ndarray, weights: np.ndarray, weights_unlabeled: np.ndarray) -> np.ndarray:
    """Per-item sums from which ``ppi_gaps`` computes every ``d_k`` (docs/method.md §9).

    ``a`` ``(G,)``: ``1[judge = primary]`` on items both labeled; ``b`` ``(G, K)``:
    ``1[r_k = primary]``, ``-1`` where ``r_k`` did not label the item; ``weights`` the
    inverse inclusion probability of an item in the overlap, ``weights_unlabeled`` that of
    its staying out of it (all ones for a simple random overlap). Columns: ``[1, A]``, then
    per human the overlap sums ``[1, A, w, wA, wB, wAB, w^2, w^2A, w^2B, w^2AB]`` and the
    proxy-only sums ``[1, A, u, uA, u^2, u^2A]``.
    """
    a = a.astype(float)[:, None]
    lab = b >= 0
    bb = np.where(lab, b, 0).astype(float)
    w, u = weights[:, None], weights_unlabeled[:, None]
    one = np.ones_like(bb)
    overlap = [one, a * one, w * one, w * a, w * bb, w * a * bb]
    overlap += [w * w * x for x in (one, a * one, bb, a * bb)]
    proxy = [one, a * one, u * one, u * a, u * u * one, u * u * a]
    per_human = np.stack([x * lab for x in overlap] + [x * ~lab for x in proxy], axis=-1)  # (G, K, 16)
    head = np.column_stack([np.ones(a.shape[0]), a[:, 0]])
    return np.hstack([head, per_human.reshape(a.shape[0], per_human.shape[1] * per_human.shape[2])])


def ppi_gaps(sums: np.ndarray, n_humans: int) -> PPIGaps:
    """``d_k = mean_all(A) - theta_k`` with PPI++ ``theta_k`` and its SE (docs/method.md §9).

    ``sums`` ``(B, 2 + 16 K)`` are ``ppi_gap_features`` summed over items (or over a
    resample). ``theta_k`` and ``lam`` are ``ppi_mean``'s on the overlap of ``r_k`` (labeled)
    and the other items (proxy only). The SE linearises ``d`` in the two samples:
    ``d = mean_L(e) + mean_U(f)``, ``e = (n_L/n) A - w~ (B - lam A)``,
    ``f = (N/n - lam u~) A``, ``SE^2 = Var_L(e)/n_L + Var_U(f)/N`` (ddof 0).
    """
    n_all, a_all = sums[:, 0:1], sums[:, 1:2]
    per = sums[:, 2:].reshape(sums.shape[0], n_humans, _L_WIDTH + _U_WIDTH)
    n_l, a_l, s_w, s_wa, s_wb, s_wab, s_w2, s_w2a, s_w2b, s_w2ab = np.moveaxis(per[..., :_L_WIDTH], -1, 0)
    n_u, a_u, s_u, s_ua, s_u2, s_u2a = np.moveaxis(per[..., _L_WIDTH:], -1, 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        mean_a = a_all / n_all
        has_u = n_u > 0
        imputed_a = np.where(has_u, s_ua / s_u, 0.0)  # mean_U(u~ A)
        theta1 = imputed_a + (s_wb - s_wa) / s_w
        # lam: covariance of the weighted residuals on L, variance of the proxy's on L and U.
        sq_l = n_l / s_w**2
        sq_u = np.where(has_u, n_u / s_u**2, 0.0)
        mean_g = s_wb / s_w - theta1
        mean_gh = s_wa / s_w - theta1
        mean_g_gh = sq_l * (s_w2ab - theta1 * (s_w2a + s_w2b) + theta1**2 * s_w2)
        cov = mean_g_gh - mean_g * mean_gh
        sum_gh = n_l * mean_gh + n_u * (imputed_a - theta1)
        sum_gh2 = n_l * sq_l * ((1 - 2 * theta1) * s_w2a + theta1**2 * s_w2) + n_u * sq_u * (
            (1 - 2 * theta1) * s_u2a + theta1**2 * s_u2
        )
        n_lu = n_l + n_u
        var_all = (sum_gh2 - sum_gh**2 / n_lu) / (n_lu - 1)
        tuned = cov / ((1 + n_l / n_u) * var_all)
        lam = np.where(has_u & (var_all > 0), np.clip(tuned, 0.0, 1.0), 0.0)
        theta = lam * imputed_a + (s_wb - lam * s_wa) / s_w
        d = mean_a - theta
        share_l, share_u = n_l / n_all, n_u / n_all
        mean_e = share_l * a_l / n_l - (s_wb - lam * s_wa) / s_w
        mean_e2 = (
            share_l**2 * a_l / n_l
            + sq_l * (s_w2b - 2 * lam * s_w2ab + lam**2 * s_w2a)
            - 2 * share_l * (s_wab - lam * s_wa) / s_w
        )
        mean_f = np.where(has_u, share_u * a_u / n_u - lam * imputed_a, 0.0)
        mean_f2 = np.where(
            has_u,
            share_u**2 * a_u / n_u - 2 * share_u * lam * imputed_a + lam**2 * sq_u * s_u2a,
            0.0,
        )
        var_d = np.maximum(mean_e2 - mean_e**2, 0.0) / n_l + np.where(
            has_u, np.maximum(mean_f2 - mean_f**2, 0.0) / n_u, 0.0
        )
    defined = n_l >= 2
    nan = np.nan
    return PPIGaps(
        d=np.where(defined, d, nan),
        standard_error=np.where(defined, np.sqrt(var_d), nan),
        lam=np.where(defined, lam, nan),
        m=n_l,
    )

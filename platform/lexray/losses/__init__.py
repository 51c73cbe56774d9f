"""Training losses: InfoNCE (LACONIC, arXiv:2601.01684, eq. (2)), MarginMSE and KL-Div distillation, FLOPS and L1 regularizers, λ schedules, L0 statistics."""

from lexray.losses.flops import FlopsSchedule, flops_loss, lambda_at
from lexray.losses.infonce import gather_with_grad, infonce_loss, infonce_scores, world_info
from lexray.losses.kl_div import kl_div_loss
from lexray.losses.l1 import l1_loss
from lexray.losses.margin_mse import margin_mse_loss
from lexray.losses.stats import active_dims

__all__ = [
    "FlopsSchedule",
    "active_dims",
    "flops_loss",
    "gather_with_grad",
    "infonce_loss",
    "infonce_scores",
    "kl_div_loss",
    "l1_loss",
    "lambda_at",
    "margin_mse_loss",
    "world_info",
]

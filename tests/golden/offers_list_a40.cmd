offers list --gpu a40 --now 2026-11-30

offers list --offers tests/fixtures/hostile/offers.csv --now 2026-11-30 --json

offers import tests/data/offers/skypilot_aws_vms.csv --format skypilot --provider aws --captured-at 2026-11-30

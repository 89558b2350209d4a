k8s render --rental-json tests/data/k8s/rental_mig.json --apply

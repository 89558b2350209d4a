mig pack --fleet examples/mig/fleet.yaml --requests examples/mig/requests.yaml --export k8s

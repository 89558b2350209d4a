mig profiles a30

mig check a100-40gb-sxm4 "3g.20gb@2" --json

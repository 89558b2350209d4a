mig check a100-40gb-sxm4 "1g.5gb,1g.5gb,2g.10gb,3g.20gb"

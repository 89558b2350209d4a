mig layouts a100-40gb-sxm4 --maximal

mig layouts a30 --maximal

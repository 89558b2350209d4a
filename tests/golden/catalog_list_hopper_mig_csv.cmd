catalog list --include-mig --architecture hopper --csv

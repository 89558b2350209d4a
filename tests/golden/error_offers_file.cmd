offers list --offers no/such/file.csv

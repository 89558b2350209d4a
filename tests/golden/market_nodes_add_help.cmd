nodes add --help

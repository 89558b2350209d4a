rent --help

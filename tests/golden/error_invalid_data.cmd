catalog list --catalog tests/fixtures/broken_catalog

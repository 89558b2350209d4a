catalog show x200 --catalog tests/fixtures/extra_catalog

catalog show l40

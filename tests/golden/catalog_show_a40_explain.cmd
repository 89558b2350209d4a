catalog show a40 --explain

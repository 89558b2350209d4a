catalog list

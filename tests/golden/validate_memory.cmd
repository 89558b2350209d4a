validate --kind memory

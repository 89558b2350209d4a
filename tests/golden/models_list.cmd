models list

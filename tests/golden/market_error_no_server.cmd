rentals list

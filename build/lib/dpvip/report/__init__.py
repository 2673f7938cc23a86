"""Tables, figures, paper values and the results bundle."""

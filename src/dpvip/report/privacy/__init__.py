"""The privacy of what is published: the bundle's privacy statement, the composition over grids
and over every release on one private dataset, the notes tables carry, the canary audit's and
the accountants' tables and figures."""

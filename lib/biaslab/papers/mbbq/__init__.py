"""MBBQ (Neplenbroek, Bisazza & Fernández, COLM 2024), notebook 7: cross-lingual bias scores with the control set."""

"""Clip features: array files, the sources a dataset reads them from (an HDF5
file, a folder of per-video files, concatenated streams), row normalisation
and resampling, and the converter between layouts."""

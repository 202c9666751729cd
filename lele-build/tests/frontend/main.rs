//! Front end and passes: small models built in code, and the real models.
mod builders;
mod fusions;
mod hostile;
mod loading;
mod pieces;
mod real_models;
mod signal;

"""Helpers the tests share: paths, hypothesis strategies, slow references and learner inputs."""

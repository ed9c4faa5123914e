"""The one-vs-rest SVM on a precomputed Gram matrix: decisions on kernel rows
against the support vectors equal scikit-learn's own on the same matrix, and
C is chosen on held-out items and refit on all."""
import numpy as np
import pytest

from spacy_structpref.classification.svm import fit_one_vs_rest, fit_tuned, tune_C
from spacy_structpref.errors import StructPrefError


def test_decisions_on_support_rows_equal_scikit_learns():
    from sklearn.svm import SVC

    rng = np.random.default_rng(0)
    X = rng.normal(size=(70, 4))
    K = np.exp(-((X[:, None] - X[None]) ** 2).sum(-1))  # an RBF Gram matrix
    y = np.argmax(X[:, :3], axis=1)  # learnable classes: not every item is a support vector
    model = fit_one_vs_rest(K[:60, :60], y[:60], 3, C=2.0, n_threads=2)
    rows = K[60:, :60][:, model.support]  # new items against the support vectors only
    for c in range(3):
        svc = SVC(kernel="precomputed", C=2.0).fit(K[:60, :60], y[:60] == c)
        np.testing.assert_allclose(model.decision(rows)[:, c], svc.decision_function(K[60:, :60]), atol=1e-9)
    assert len(model.support) < 60  # some training items are not support vectors
    with pytest.raises(StructPrefError, match="support vectors"):
        model.decision(K[60:, :60])


def test_C_is_chosen_on_the_held_out_items_and_refit_on_all():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(50, 3))
    K = X @ X.T
    y = (X[:, 0] > 0).astype(int)
    held = np.arange(50) % 10 == 9
    scores = tune_C(K, y, 2, held, [0.01, 1.0])
    model, C, got = fit_tuned(K, y, 2, [0.01, 1.0], held)
    assert got == scores and C == max(scores, key=lambda c: (scores[c], -c))
    np.testing.assert_allclose(model.coef, fit_one_vs_rest(K, y, 2, C).coef)


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_a_gram_matrix_that_is_not_finite_is_refused_before_any_svm_trains(bad):
    # scikit-learn's own scan is skipped in the per-class fits: this check is the only one
    rng = np.random.default_rng(2)
    X = rng.normal(size=(30, 3))
    K = X @ X.T
    K[4, 7] = K[7, 4] = bad
    y = (X[:, 0] > 0).astype(int)
    with pytest.raises(StructPrefError, match="not finite"):
        fit_one_vs_rest(K, y, 2)
    with pytest.raises(StructPrefError, match="not finite"):
        fit_tuned(K, y, 2, [0.1, 1.0], np.arange(30) % 10 == 9)

var classpolicytrain_1_1precision_1_1AutocastGuard =
[
    [ "AutocastGuard", "classpolicytrain_1_1precision_1_1AutocastGuard.html#a35e7eac579d00736947039efd6a88c21", null ]
];
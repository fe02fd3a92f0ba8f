var steps_8hpp =
[
    [ "policytrain::accumulate::Steps", "classpolicytrain_1_1accumulate_1_1Steps.html", "classpolicytrain_1_1accumulate_1_1Steps" ]
];
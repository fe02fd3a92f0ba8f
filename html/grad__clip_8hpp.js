var grad__clip_8hpp =
[
    [ "policytrain::callbacks::GradClip", "classpolicytrain_1_1callbacks_1_1GradClip.html", "classpolicytrain_1_1callbacks_1_1GradClip" ],
    [ "policytrain::callbacks::GradClip::Options", "structpolicytrain_1_1callbacks_1_1GradClip_1_1Options.html", "structpolicytrain_1_1callbacks_1_1GradClip_1_1Options" ]
];
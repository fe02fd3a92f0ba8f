var searchData=
[
  ['gradclip_0',['GradClip',['../classpolicytrain_1_1callbacks_1_1GradClip.html',1,'policytrain::callbacks']]],
  ['graphoptions_1',['GraphOptions',['../structpolicytrain_1_1step_1_1GraphOptions.html',1,'policytrain::step']]],
  ['graphreplayable_2',['GraphReplayable',['../classpolicytrain_1_1optim_1_1GraphReplayable.html',1,'policytrain::optim']]]
];

var searchData=
[
  ['halvings_0',['halvings',['../classpolicytrain_1_1accumulate_1_1AutoBatch.html#a6c46eb933d24d063373debf7bfbbf909',1,'policytrain::accumulate::AutoBatch']]],
  ['has_1',['has',['../classpolicytrain_1_1Context.html#ab76f91fc2bd1fe7cd3fdada8d68b4254',1,'policytrain::Context::has()'],['../classpolicytrain_1_1Trainer.html#a23d681e23425b016ed8b244accfa184f',1,'policytrain::Trainer::has()']]],
  ['history_2',['history',['../classpolicytrain_1_1checkpoint_1_1Disk.html#aba44d75bc63aa69f34f6c1999c8c934e',1,'policytrain::checkpoint::Disk']]],
  ['horizon_3',['horizon',['../classpolicytrain_1_1schedule_1_1Lr.html#a3940ed308de0ab59fc72928df3f6edc9',1,'policytrain::schedule::Lr']]]
];
